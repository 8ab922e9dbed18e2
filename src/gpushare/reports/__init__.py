"""What people and LMSs read: feedback in three languages, scores, JUnit XML, policy."""
