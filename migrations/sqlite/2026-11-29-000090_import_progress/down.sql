DROP TABLE subscription_imports;
