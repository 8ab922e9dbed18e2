"""What people and LMSs read: feedback in the learner's language, scores, JUnit XML, policy."""
