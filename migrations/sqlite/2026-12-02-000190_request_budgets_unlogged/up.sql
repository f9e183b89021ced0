-- PostgreSQL makes its shared request budgets unlogged here; SQLite keeps its buckets in the
-- process's memory and has nothing to change. (The two databases keep the same list of
-- migrations.)
SELECT 1;
