DROP TABLE time_slot_options;
DROP TABLE time_slots;
DROP TABLE box_sizes;
DROP TABLE box_products;
DROP TABLE boxes;
