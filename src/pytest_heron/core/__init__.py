"""The small shared leaves every stage may use: error types and kinds (:mod:`.errors`), the data
types adapters see (:mod:`.types`), the bounded reader of JSON records (:mod:`.records`), the
cache folder (:mod:`.paths`), progress lines (:mod:`.progress`) and text made safe to show
(:mod:`.safe_text`). Nothing here imports another part of ``pytest_heron``; each module is
imported by its own name (``pytest_heron.core.errors``), so this package has no door to keep.
"""
