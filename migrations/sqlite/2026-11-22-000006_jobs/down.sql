ALTER TABLE sync_runs DROP COLUMN next_cursor;
DROP TABLE jobs;
