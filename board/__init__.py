"""The published board, shipped in the wheel as the package ``heron_board`` for its
``protocol.yaml``: ``heron verify-submission`` reads it outside a clone of the repository
(pytest_heron.board.protocol.default_protocol_path)."""
