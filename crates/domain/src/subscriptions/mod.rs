//! Subscriptions (seed 002): customers, addresses, subscriptions, actions and states,
//! recurrence, and the scheduler's rules. Filled by the subscriptions issue.
