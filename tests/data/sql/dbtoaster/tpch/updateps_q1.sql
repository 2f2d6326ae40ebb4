-- IMP's UPDATEPS form (the IMP artifact's grammar: UPDATEPS (update statements) PROVENANCE ... OF (query)):
-- a provenance sketch of a grouped SUM kept under a delete, an update and an insert after the data.
INCLUDE 'test/queries/tpch/schemas.sql';
UPDATEPS (DELETE FROM lineitem WHERE orderkey < 100; UPDATE lineitem SET quantity = quantity + 1 WHERE returnflag = 'R';
          INSERT INTO lineitem VALUES (9999, 1, 1, 1, 5, 100.00, 0.05, 0.01, 'A', 'F', DATE('1995-01-01'), DATE('1995-01-01'), DATE('1995-01-01'), 'NONE', 'AIR', 'x'))
PROVENANCE WITH COARSE GRAINED RANGESB(lineitem(orderkey 0, 100, 200, 400, 800, 70000)) OF (
  SELECT returnflag, SUM(quantity) AS sum_qty, COUNT(*) AS n FROM lineitem GROUP BY returnflag
);
