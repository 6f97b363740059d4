"""The data generator (SPEC §6): train, debias and sample a P → label → H causal LM.

- :mod:`~zdebias.generation.settings`: the settings objects (training, debiasing, sampling);
- :mod:`~zdebias.generation.format`: the sequence format, label tokens, parsing outputs back;
- :mod:`~zdebias.generation.losses`: likelihood, unlikelihood and masked unlikelihood losses;
- :mod:`~zdebias.generation.mask`: which tokens of a z-filter-rejected example are biased;
- :mod:`~zdebias.generation.trainer`: ``train_generator`` and ``debias_generator`` (HF Trainer);
- :mod:`~zdebias.generation.sample`: ``sample_generator``, sharded, resumable and seeded;
- :mod:`~zdebias.generation.score`: ``load_generator`` and ``hypothesis_logprobs``.
"""
