"""The data generator (docs/design.md §6): train, debias and sample a P → label → H causal LM.

- :mod:`~zdebias.generation.settings`: the settings objects (training, debiasing, sampling);
- :mod:`~zdebias.generation.format`: the sequence format, label tokens, parsing outputs back;
- :mod:`~zdebias.generation.losses`: likelihood, unlikelihood and masked unlikelihood losses;
- :mod:`~zdebias.generation.mask`: which tokens of a z-filter-rejected example are biased;
- :mod:`~zdebias.generation.trainer`: ``train_generator`` and ``debias_generator`` (HF Trainer);
- :mod:`~zdebias.generation.debias`: ``zfilter_and_debias``, z-filter then ``debias_generator``;
- :mod:`~zdebias.generation.sample`: ``sample_generator``, sharded, resumable and seeded: the
  front door that picks the backend and the worker mode, over (lowest first)
  :mod:`~zdebias.generation.store` (the sampling folder: state, shards, ``read_samples``),
  :mod:`~zdebias.generation.rounds` (the round loop every backend shares),
  :mod:`~zdebias.generation.trained` (backends hf, vllm), :mod:`~zdebias.generation.prompted`
  (backends openai, local) and :mod:`~zdebias.generation.workers` (``--worker``,
  ``--workers``, merge);
- :mod:`~zdebias.generation.score`: ``load_generator`` and ``hypothesis_logprobs``.
"""
