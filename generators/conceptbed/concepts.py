"""The ConceptBed concept library as data (ConceptBed paper, Table 9): 4 PACS styles, 80 ImageNet
objects and the 200 CUB classes.

Why data and not code: the lists are the benchmark's definition; keeping them in one place,
with their parent concept (the Visual Genome caption subject, see Table 10's shared counts), lets
the spec resolver, the samplers and the evaluation agree on names.
"""

from __future__ import annotations

# PACS: the four domains are the style concepts; the seven entities are what a style is applied to.
PACS_STYLES: tuple[str, ...] = ("art_painting", "cartoon", "photo", "sketch")
PACS_ENTITIES: tuple[str, ...] = ("dog", "elephant", "giraffe", "guitar", "horse", "house", "person")

# The 80 ImageNet concepts in Table 9's order, each with its parent concept. The parents are the
# groups that share identical composition counts in Table 10 (e.g. every dog breed has 1222
# compositions): the Visual Genome subject word that the composite captions were drawn for.
IMAGENET_CONCEPTS: tuple[tuple[str, str], ...] = (
    ("langur", "monkey"),
    ("hand-held_computer", "computer"),
    ("guenon", "monkey"),
    ("brambling", "bird"),
    ("desktop_computer", "computer"),
    ("speedboat", "boat"),
    ("titi", "monkey"),
    ("airship", "aircraft"),
    ("tiger_cat", "cat"),
    ("organ", "piano"),
    ("squirrel_monkey", "monkey"),
    ("bluetick", "dog"),
    ("siamang", "monkey"),
    ("yawl", "boat"),
    ("lifeboat", "boat"),
    ("ambulance", "car"),
    ("beagle", "dog"),
    ("digital_clock", "clock"),
    ("fire_engine", "truck"),
    ("Walker_hound", "dog"),
    ("gondola", "boat"),
    ("pill_bottle", "bottle"),
    ("fireboat", "boat"),
    ("proboscis_monkey", "monkey"),
    ("moving_van", "truck"),
    ("rotisserie", "oven"),
    ("slide_rule", "computer"),
    ("Irish_wolfhound", "dog"),
    ("junco", "bird"),
    ("cab", "car"),
    ("magpie", "bird"),
    ("robin", "bird"),
    ("jeep", "car"),
    ("colobus", "monkey"),
    ("airliner", "aircraft"),
    ("gibbon", "monkey"),
    ("letter_opener", "knife"),
    ("garbage_truck", "truck"),
    ("limousine", "car"),
    ("English_foxhound", "dog"),
    ("borzoi", "dog"),
    ("baboon", "monkey"),
    ("basset", "dog"),
    ("capuchin", "monkey"),
    ("convertible", "car"),
    ("analog_clock", "clock"),
    ("redbone", "dog"),
    ("canoe", "boat"),
    ("spider_monkey", "monkey"),
    ("bulbul", "bird"),
    ("Afghan_hound", "dog"),
    ("goldfinch", "bird"),
    ("patas", "monkey"),
    ("tabby", "cat"),
    ("web_site", "computer"),
    ("grand_piano", "piano"),
    ("laptop", "computer"),
    ("chickadee", "bird"),
    ("Dutch_oven", "oven"),
    ("black-and-tan_coonhound", "dog"),
    ("marmoset", "monkey"),
    ("chimpanzee", "monkey"),
    ("macaque", "monkey"),
    ("police_van", "truck"),
    ("tow_truck", "truck"),
    ("cleaver", "knife"),
    ("howler_monkey", "monkey"),
    ("bloodhound", "dog"),
    ("pickup", "truck"),
    ("house_finch", "bird"),
    ("beer_bottle", "bottle"),
    ("notebook", "computer"),
    ("water_ouzel", "bird"),
    ("orangutan", "monkey"),
    ("Madagascar_cat", "monkey"),
    ("gorilla", "monkey"),
    ("indri", "monkey"),
    ("beach_wagon", "car"),
    ("jay", "bird"),
    ("indigo_bunting", "bird"),
)

# CUB-200-2011 class folder names (classes.txt), in Table 9's order.
CUB_CLASSES: tuple[str, ...] = tuple(
    f"{index:03d}.{name}"
    for index, name in enumerate(
        """
Black_footed_Albatross Laysan_Albatross Sooty_Albatross Groove_billed_Ani Crested_Auklet
Least_Auklet Parakeet_Auklet Rhinoceros_Auklet Brewer_Blackbird Red_winged_Blackbird
Rusty_Blackbird Yellow_headed_Blackbird Bobolink Indigo_Bunting Lazuli_Bunting Painted_Bunting
Cardinal Spotted_Catbird Gray_Catbird Yellow_breasted_Chat Eastern_Towhee Chuck_will_Widow
Brandt_Cormorant Red_faced_Cormorant Pelagic_Cormorant Bronzed_Cowbird Shiny_Cowbird
Brown_Creeper American_Crow Fish_Crow Black_billed_Cuckoo Mangrove_Cuckoo Yellow_billed_Cuckoo
Gray_crowned_Rosy_Finch Purple_Finch Northern_Flicker Acadian_Flycatcher
Great_Crested_Flycatcher Least_Flycatcher Olive_sided_Flycatcher Scissor_tailed_Flycatcher
Vermilion_Flycatcher Yellow_bellied_Flycatcher Frigatebird Northern_Fulmar Gadwall
American_Goldfinch European_Goldfinch Boat_tailed_Grackle Eared_Grebe Horned_Grebe
Pied_billed_Grebe Western_Grebe Blue_Grosbeak Evening_Grosbeak Pine_Grosbeak
Rose_breasted_Grosbeak Pigeon_Guillemot California_Gull Glaucous_winged_Gull Heermann_Gull
Herring_Gull Ivory_Gull Ring_billed_Gull Slaty_backed_Gull Western_Gull Anna_Hummingbird
Ruby_throated_Hummingbird Rufous_Hummingbird Green_Violetear Long_tailed_Jaeger
Pomarine_Jaeger Blue_Jay Florida_Jay Green_Jay Dark_eyed_Junco Tropical_Kingbird Gray_Kingbird
Belted_Kingfisher Green_Kingfisher Pied_Kingfisher Ringed_Kingfisher White_breasted_Kingfisher
Red_legged_Kittiwake Horned_Lark Pacific_Loon Mallard Western_Meadowlark Hooded_Merganser
Red_breasted_Merganser Mockingbird Nighthawk Clark_Nutcracker White_breasted_Nuthatch
Baltimore_Oriole Hooded_Oriole Orchard_Oriole Scott_Oriole Ovenbird Brown_Pelican White_Pelican
Western_Wood_Pewee Sayornis American_Pipit Whip_poor_Will Horned_Puffin Common_Raven
White_necked_Raven American_Redstart Geococcyx Loggerhead_Shrike Great_Grey_Shrike
Baird_Sparrow Black_throated_Sparrow Brewer_Sparrow Chipping_Sparrow Clay_colored_Sparrow
House_Sparrow Field_Sparrow Fox_Sparrow Grasshopper_Sparrow Harris_Sparrow Henslow_Sparrow
Le_Conte_Sparrow Lincoln_Sparrow Nelson_Sharp_tailed_Sparrow Savannah_Sparrow Seaside_Sparrow
Song_Sparrow Tree_Sparrow Vesper_Sparrow White_crowned_Sparrow White_throated_Sparrow
Cape_Glossy_Starling Bank_Swallow Barn_Swallow Cliff_Swallow Tree_Swallow Scarlet_Tanager
Summer_Tanager Artic_Tern Black_Tern Caspian_Tern Common_Tern Elegant_Tern Forsters_Tern
Least_Tern Green_tailed_Towhee Brown_Thrasher Sage_Thrasher Black_capped_Vireo
Blue_headed_Vireo Philadelphia_Vireo Red_eyed_Vireo Warbling_Vireo White_eyed_Vireo
Yellow_throated_Vireo Bay_breasted_Warbler Black_and_white_Warbler Black_throated_Blue_Warbler
Blue_winged_Warbler Canada_Warbler Cape_May_Warbler Cerulean_Warbler Chestnut_sided_Warbler
Golden_winged_Warbler Hooded_Warbler Kentucky_Warbler Magnolia_Warbler Mourning_Warbler
Myrtle_Warbler Nashville_Warbler Orange_crowned_Warbler Palm_Warbler Pine_Warbler
Prairie_Warbler Prothonotary_Warbler Swainson_Warbler Tennessee_Warbler Wilson_Warbler
Worm_eating_Warbler Yellow_Warbler Northern_Waterthrush Louisiana_Waterthrush Bohemian_Waxwing
Cedar_Waxwing American_Three_toed_Woodpecker Pileated_Woodpecker Red_bellied_Woodpecker
Red_cockaded_Woodpecker Red_headed_Woodpecker Downy_Woodpecker Bewick_Wren Cactus_Wren
Carolina_Wren House_Wren Marsh_Wren Rock_Wren Winter_Wren Common_Yellowthroat
""".split(),
        start=1,
    )
)

CONCEPT_KINDS: tuple[str, ...] = ("style", "object", "cub")


def readable(name: str) -> str:
    """'001.Black_footed_Albatross' -> 'Black footed Albatross'; 'tiger_cat' -> 'tiger cat'."""
    if len(name) > 4 and name[:3].isdigit() and name[3] == ".":
        name = name[4:]
    return name.replace("_", " ")


def library() -> dict[str, tuple[str, str]]:
    """All 284 concepts: name -> (kind, parent word used as the caption subject / class noun)."""
    concepts: dict[str, tuple[str, str]] = {}
    for style in PACS_STYLES:
        concepts[style] = ("style", readable(style))
    for name, parent in IMAGENET_CONCEPTS:
        concepts[name] = ("object", parent)
    for name in CUB_CLASSES:
        concepts[name] = ("cub", "bird")
    return concepts
