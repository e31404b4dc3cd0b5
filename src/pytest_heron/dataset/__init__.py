"""Stage 2: what is asked: the schema's DDL read as a catalogue, and the question files."""
