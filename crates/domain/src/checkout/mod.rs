//! The headless checkout: orders in checkout, `application_state`, pricing, the payment gateway
//! port. Filled by the headless checkout issue.
