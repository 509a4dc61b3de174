"""conceptforge filters: VQA multiple-choice ranking and oracle checks over generated candidates.

Modules (each with one job):

* ``questions``: the paper's multiple-choice question per CUB attribute group.
* ``vqa``: option-letter probabilities of any image-text-to-text model (``VQAScorer``).
* ``sub_filter``: SUB's keep/rank/drop decision and its statistics (pure, no I/O).
* ``sub_pipeline``: candidates dir -> cached scores -> filtered dataset dir.
* ``sub_filter_run``: ``conceptforge filter sub`` as a library call (``SubFilterConfig``, ``build_stage``, ``filter_sub``).
* ``classifier_oracle``: class probabilities of any image classifier mapped onto target class names.
* ``candidate_selection``: reference-bird and attribute-candidate selection (the numbers).
* ``candidate_spec``: ``conceptforge select-candidates`` as library calls, and the candidate spec they update.
* ``dataset_io``: reader for Hub-layout dataset dirs (a local CUB_200_2011 dir is read by
  ``conceptforge.cub``, the core's CUB reader).
"""
