"""The board: the protocol a published result follows, submissions, their verification and the
leaderboard built from verified submissions only (``heron submit``, ``heron verify-submission``,
``heron leaderboard``)."""
