DROP TRIGGER subscription_counts_insert_delete ON subscriptions;
DROP TRIGGER subscription_counts_update ON subscriptions;
CREATE TRIGGER subscription_counts_insert_delete AFTER INSERT OR DELETE ON subscriptions
    FOR EACH ROW EXECUTE FUNCTION subscription_counts_keep();
CREATE TRIGGER subscription_counts_update AFTER UPDATE OF subscription_status ON subscriptions
    FOR EACH ROW WHEN (OLD.subscription_status IS DISTINCT FROM NEW.subscription_status)
    EXECUTE FUNCTION subscription_counts_keep();
