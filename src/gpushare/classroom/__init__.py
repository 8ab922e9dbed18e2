"""Grading a whole class: many snapshot files at once, in parallel, into one gradebook.

``gpushare class grade`` picks the submissions (:mod:`.inputs`; whose each is, the instructor's
layout decides: :mod:`.identity`), grades them in worker processes that each stay alive for
many snapshots (:mod:`.pool`, :mod:`.worker`), and writes one folder per learner,
``grades.csv`` (:mod:`.gradebook`) and ``report.html`` (:mod:`.report`), with a regrade diff
against an earlier run (:mod:`.diff`). An Indexed Job on Kubernetes runs shards of the same
command (the operator's ``deploy/job.py`` prints it), and ``class merge`` joins the shards'
folders into one gradebook and one report (:mod:`.merge`); both flag what an instructor should
look at (:mod:`.flags`). The report groups failures by the reason :mod:`.feedback` reads in them.
"""
