"""Running a learner's untrusted script: isolation levels, caps, nothing left.

Levels bubblewrap, uid and none; never the grader's uid where one can be had.
"""
