"""The bug zoo (``privbench zoo list`` / ``privbench zoo run``).

The privacy bugs found in real DP code, each a plug-in mutant of a correct mechanism (``bench.zoo.bugs``), scored
against every auditor (``bench.zoo.auditors``: privbench's own audits and conformance tests, and the anchors' own code
where its package is installed) over seeds, with each auditor's false alarms measured on the correct mechanisms
(``bench.zoo.runner``). Plug-in API: ``bench.zoo.api``.
"""
