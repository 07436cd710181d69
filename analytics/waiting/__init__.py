"""Why a workload waits (`why`), what waiting costs (`cost`) and what would fit now
(`suggest`): the pending statuses the collector stored, classified (docs/decisions/0201)."""
