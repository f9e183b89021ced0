DROP TABLE box_selections;
