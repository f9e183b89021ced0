ALTER TABLE request_budgets SET LOGGED;
