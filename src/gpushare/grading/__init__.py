"""Grading: checks, the lab's rules, the cluster read, the learner's runs, capture."""
