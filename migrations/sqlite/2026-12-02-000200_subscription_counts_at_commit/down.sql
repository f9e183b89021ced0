-- PostgreSQL keeps its per-status subscription counts at commit from here on; SQLite has one
-- writer at a time, so nothing waits behind its counts, and it changes nothing. (The two
-- databases keep the same list of migrations.)
SELECT 1;
