-- The demo's source tables (scripts/postgres.sh's server, database shop).
CREATE TABLE customers (
  id serial PRIMARY KEY,
  name text NOT NULL,
  email text,
  balance numeric(12, 2) NOT NULL DEFAULT 0
);
CREATE TABLE orders (
  id bigserial PRIMARY KEY,
  customer_id int NOT NULL,
  status text NOT NULL,
  total numeric(12, 2) NOT NULL
);
CREATE TABLE order_lines (
  order_id bigint NOT NULL,
  line int NOT NULL,
  sku text NOT NULL,
  qty int NOT NULL,
  PRIMARY KEY (order_id, line)
);
INSERT INTO customers (name, email, balance) VALUES
  ('ann', 'ann@example.com', 10.50),
  ('bob', 'bob@example.org', 0);
INSERT INTO orders (customer_id, status, total) VALUES (1, 'new', 21.00);
INSERT INTO order_lines VALUES (1, 1, 'apple', 3), (1, 2, 'pear', 1);
