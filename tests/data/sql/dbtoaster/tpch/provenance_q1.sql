-- An IMP provenance statement (its PROVENANCE clause) over DBToaster's TPC-H schema.
INCLUDE 'test/queries/tpch/schemas.sql';

PROVENANCE WITH COARSE GRAINED RANGESB(lineitem(orderkey 0, 1000, 2000, 4000, 8000, 70000)) OF (
  SELECT returnflag, linestatus, SUM(quantity) AS sum_qty, COUNT(*) AS count_order
  FROM lineitem
  WHERE shipdate <= DATE('1997-09-01')
  GROUP BY returnflag, linestatus
);
