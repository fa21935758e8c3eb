"""Where and how models are trained.

What to train and the pure function that trains it (``trainjob``), the jobs of a run looked up in the content-addressed
model cache or submitted (``jobs``, ``cache``, keyed by ``fingerprint``: the code and libraries that shape a model), the
executors (``executor``: ``local_executor``, ``ray_executor``; any call as a job, the handle and fault model of every
job: ``calljob``), vectorised ensembles of small models (``ensemble``) and a mechanism's faults contained to its own job
(``faults``).
"""
