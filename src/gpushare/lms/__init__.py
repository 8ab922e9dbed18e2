"""The LMS side: the Gradescope autograder, and a class's grades in Canvas's and Moodle's imports.

:mod:`.gradescope` builds what an operator uploads to Gradescope and is the body of its
``run_autograder``. ``gpushare class export`` (:mod:`.export`) writes a finished class folder as
the gradebook import of Canvas (:mod:`.canvas`) or Moodle (:mod:`.moodle`), as each LMS's own
importer parses it, the learners mapped to LMS identities by a roster (:mod:`.roster`) and a
grade decided for each (:mod:`.plan`).
"""
