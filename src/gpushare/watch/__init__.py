"""``gpushare watch``: the lab's steps graded live while the learner works.

:mod:`.cluster` follows the apiserver's watch API on what the checks read, :mod:`.files` the
work dir's file events, :mod:`.screen` draws, and :mod:`.loop` knows which step read what and
ties them together. Nothing here writes to the cluster: a watch only ever GETs.
"""
