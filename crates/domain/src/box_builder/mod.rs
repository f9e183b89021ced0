//! The box builder (seed 002): boxes, products, sizes, time slots, selections and their rules.
//! Filled by the box builder issue.
