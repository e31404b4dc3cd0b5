"""Stage 7: what comes out: the run's conditions (:mod:`.conditions`), the results document
(:mod:`.document`), the terminal summary (:mod:`.terminal`), the ``--heron-report`` folder
(:mod:`.folder`), the journal (:mod:`.journal`) and atomic writes (:mod:`.files`)."""
