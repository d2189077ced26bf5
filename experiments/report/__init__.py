"""Generated reports: tables computed as DataFrames (:mod:`.tables`), rendered to markdown
(:mod:`.markdown`) in the study README (:mod:`.study`) and the peers README (:mod:`.peers`)."""
