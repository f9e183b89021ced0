-- Each subscription CSV import (POST /imports) and how far it has gone, for GET /imports to
-- show while a long one runs: the file's data rows, those done so far (created + skipped_existing
-- + failed_rows), updated after every batch of rows. status: running, done (every row done), or
-- stopped (a storage failure ended it early; a re-run of the file finishes it); finished_at set
-- with done or stopped. A process that exits under an import leaves it running.
CREATE TABLE subscription_imports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id BIGINT NOT NULL REFERENCES shops (id),
    rows_total BIGINT NOT NULL,
    rows_done BIGINT NOT NULL,
    created BIGINT NOT NULL,
    skipped_existing BIGINT NOT NULL,
    failed_rows BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    status TEXT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX subscription_imports_shop ON subscription_imports (shop_id, id);
