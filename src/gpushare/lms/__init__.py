"""The LMS side of gpushare: what an operator uploads to Gradescope (or runs on a runner of
their own in the same layout), and the instructor's visibility policy for checks.

:mod:`gpushare.lms.policy` reads the policy and applies it to a report, for every output
(results.json, JUnit XML, the terminal, the class report); :mod:`gpushare.lms.gradescope`
builds the autograder bundle and is the body of its ``run_autograder``.
"""
