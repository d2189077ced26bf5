"""Generated reports: tables computed as DataFrames (:mod:`.tables`), formatted (:mod:`.markdown`) into one
:class:`.page.Page` per report (:mod:`.study`, :mod:`.peers_page`, :mod:`.shift_page`, :mod:`.synthetic_page`,
:mod:`.downstream_page`, :mod:`.overview`), each written by :func:`.page.write_page`."""
