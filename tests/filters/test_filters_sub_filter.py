import json

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.filters.sub.decision import (
    COUNT_KEYS,
    FilterParams,
    ScoredCandidate,
    decide,
    filter_statistics,
    share_count,
)

ATTR = "has_crown_color::black"


def cand(item_id, prob, answer="black", bird="Blue_Jay", attribute=ATTR):
    return ScoredCandidate(item_id, bird, attribute, attribute.split("::")[1], answer, prob)


def test_share_count_is_robust_to_float_noise():
    assert share_count(0.1, 500) == 50
    assert share_count(0.1, 30) == 3  # 0.1 * 30 = 3.0000000000000004 in floats
    assert share_count(0.1, 5) == 1
    assert share_count(1.0, 7) == 7
    assert share_count(0.0, 7) == 0


def test_wrong_answers_are_discarded_and_the_rest_ranked():
    cands = [cand(f"i{k:02d}", p) for k, p in enumerate([0.9, 0.5, 0.7, 0.95, 0.2])]
    cands += [cand("i10", 0.99, answer="red"), cand("i11", 0.0, answer=None)]
    decision = decide(cands, FilterParams(keep_fraction=3 / 7))
    assert decision.ranks == {"i03": 0, "i00": 1, "i02": 2}
    [pair] = decision.pairs
    assert (pair.candidates, pair.wrong_answer, pair.unreadable, pair.kept, pair.below_rank) == (7, 1, 1, 3, 2)
    assert not pair.dropped


def test_ties_are_broken_by_item_id_whatever_the_input_order():
    cands = [cand(name, 0.8) for name in ("c", "a", "d", "b")] + [cand("z", 0.9)]
    for order in (cands, list(reversed(cands))):
        decision = decide(order, FilterParams(keep_fraction=0.6))  # 3 of 5
        assert decision.ranks == {"z": 0, "a": 1, "b": 2}


def test_pair_dropped_when_too_few_survive():
    # 20 candidates, keep 10% = 2; only one answers S+ -> the pair is eliminated.
    cands = [cand(f"i{k:02d}", 0.3, answer="red") for k in range(19)] + [cand("i19", 0.9)]
    decision = decide(cands, FilterParams(keep_fraction=0.1))
    [pair] = decision.pairs
    assert pair.dropped and pair.kept == 0 and pair.in_dropped_pair == 1 and decision.ranks == {}
    assert "only 1 of 20" in pair.reason
    # A looser survivor rule keeps the single survivor.
    loose = decide(cands, FilterParams(keep_fraction=0.1, min_survivor_fraction=0.05))
    assert loose.ranks == {"i19": 0}


def test_edge_fractions():
    cands = [cand(f"i{k}", 0.1 * (k + 1)) for k in range(4)]
    everything = decide(cands, FilterParams(keep_fraction=1.0))
    assert everything.ranks == {"i3": 0, "i2": 1, "i1": 2, "i0": 3}
    # One wrong answer: with keep_fraction 1.0 all 4 must survive, so the pair is dropped.
    assert decide(cands[:3] + [cand("i3", 0.9, answer="red")], FilterParams(keep_fraction=1.0)).pairs[0].dropped
    tiny = decide(cands, FilterParams(keep_fraction=0.01))  # ceil -> at least one image
    assert tiny.ranks == {"i3": 0}
    floor = decide(cands, FilterParams(keep_fraction=1.0, min_survivor_fraction=0.0, min_splus_prob=0.15))
    assert set(floor.ranks) == {"i1", "i2", "i3"} and floor.pairs[0].below_threshold == 1
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ConceptforgeError, match="--keep-fraction"):
            FilterParams(keep_fraction=bad)


def test_statistics_account_for_every_candidate():
    cands = [cand(f"a{k}", k / 10) for k in range(10)]
    cands += [cand(f"b{k}", 0.5, bird="Cardinal", answer="red" if k else "black") for k in range(10)]
    cands += [
        cand(f"c{k}", 0.5, bird="Cardinal", attribute="has_bill_shape::needle", answer="needle") for k in range(10)
    ]
    params = FilterParams(keep_fraction=0.2)
    decision = decide(cands, params)
    stats = filter_statistics(decision, params)
    totals = stats["totals"]
    assert sum(totals[key] for key in COUNT_KEYS if key != "candidates") == totals["candidates"] == 30
    assert totals["kept"] == len(decision.ranks) == 4
    assert (totals["pairs"], totals["pairs_kept"], totals["pairs_dropped"]) == (3, 2, 1)
    assert stats["per_attribute"][ATTR]["pairs_dropped"] == 1
    assert stats["per_attribute"][ATTR]["wrong_answer"] == 9
    assert stats["per_group"]["has_bill_shape"]["kept"] == 2
    assert stats["dropped_pairs"] == [
        {"bird": "Cardinal", "attribute": ATTR, "reason": "only 1 of 10 images answer S+; 2 needed"}
    ]
    assert stats["params"]["min_survivor_fraction"] == 0.2


def test_filter_provenance_is_collected_and_redacted(tmp_path):
    # the filtered card's provenance goes through the cards' collector: pinned local model,
    # package versions, and a command line with tokens redacted (it used to be joined raw)
    from conceptforge.filters.sub.pipeline import FilterRunConfig, provenance_for

    model = tmp_path / "vlm"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = FilterRunConfig(
        vqa_model=str(model), vqa_revision=None, answer_hint="letter", candidates=str(tmp_path / "c")
    )
    token = "hf_" + "a" * 34
    provenance = provenance_for(config, FilterParams(), batch_size=4, argv=["filter_sub.py", "--token", token, "c"])
    assert token not in json.dumps(provenance)
    assert provenance["command_line"].endswith("--token *** c")
    assert provenance["models"] == [{"role": "vqa", "id": str(model), "revision": provenance["models"][0]["revision"]}]
    assert provenance["models"][0]["revision"].startswith("local-sha256:")
    assert provenance["parameters"]["vqa"]["candidates"] == str(tmp_path / "c")
    assert provenance["parameters"]["batch_size"] == 4 and "torch" in provenance["packages"]
