"""How the statistics operations run on files: reading an input (``source``), choosing a way
to z-filter it (``plan``), the sharded and two-process ways with their forked workers
(``sharded``, ``shard``, ``workers``, ``merge``, ``part_files``, ``writer``), the kept rows'
summary from the input's matrix (``kept``, ``hypotheses``) and the operations that publish the
outputs (``operations``). The algorithms they run are in :mod:`zdebias.stats`.
"""
