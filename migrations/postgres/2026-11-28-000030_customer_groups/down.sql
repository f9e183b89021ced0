DROP TABLE customer_group_members;
DROP TABLE customer_groups;
