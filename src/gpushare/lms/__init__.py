"""The LMS side: the Gradescope autograder bundle and its ``run_autograder``.

:mod:`gpushare.lms.gradescope` builds what an operator uploads to Gradescope (or runs on a
runner of their own in the same layout) and is the body of its ``run_autograder``; the
instructor's visibility policy it applies is :mod:`gpushare.reports.policy`, shared with every
other output.
"""
