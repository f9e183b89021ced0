-- The per-status counts of a shop's subscriptions are kept when the transaction commits rather
-- than at each status change. A count row stays locked from its update to the end of the
-- transaction: updated at the change, it was held for the rest of it, and a scheduler run that
-- begins a hundred orders held every shard of its shop's `active` and `processing` counts while
-- the placements finishing beside it each waited for one. Deferred, a row is held only while
-- the transaction commits. The function and the figures are unchanged.
DROP TRIGGER subscription_counts_insert_delete ON subscriptions;
DROP TRIGGER subscription_counts_update ON subscriptions;
CREATE CONSTRAINT TRIGGER subscription_counts_insert_delete AFTER INSERT OR DELETE ON subscriptions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION subscription_counts_keep();
CREATE CONSTRAINT TRIGGER subscription_counts_update AFTER UPDATE OF subscription_status ON subscriptions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.subscription_status IS DISTINCT FROM NEW.subscription_status)
    EXECUTE FUNCTION subscription_counts_keep();
