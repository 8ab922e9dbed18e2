"""The LMS side: the Gradescope autograder, and a class's grades in Canvas's and Moodle's imports.

:mod:`gpushare.lms.gradescope` builds what an operator uploads to Gradescope (or runs on a
runner of their own in the same layout) and is the body of its ``run_autograder``; the
instructor's visibility policy it applies is :mod:`gpushare.reports.policy`, shared with every
other output.

``gpushare class export`` (:mod:`gpushare.lms.export`) writes a finished class folder as the
gradebook import file of Canvas (:mod:`gpushare.lms.canvas`) or Moodle
(:mod:`gpushare.lms.moodle`), in the form each LMS's own importer parses, with the learners
mapped to LMS identities by a roster (:mod:`gpushare.lms.roster`) and a grade decided for each
(:mod:`gpushare.lms.plan`).
"""
