-- The shared request budgets are soft state: a bucket lost in a crash starts full again, as a
-- new one does. Unlogged, a lease's write skips the write-ahead log, so a request that waits
-- for a lease never waits for a log flush.
ALTER TABLE request_budgets SET UNLOGGED;
