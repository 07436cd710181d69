-- v017: a plan's effect measured on the scheduling twin (issue 36, docs/decisions/0239). The plan
-- body stays frozen; the latest measurement lives beside it, NULL until the twin judges the plan.
ALTER TABLE plans ADD COLUMN twin_effect JSON;
