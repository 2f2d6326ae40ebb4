-- TPC-H Q1 as DBToaster ships it (dbtoaster-a5, test/queries/tpch/query1.sql; public).
INCLUDE 'test/queries/tpch/schemas.sql';

SELECT  returnflag,
        linestatus,
        SUM(quantity)                                       AS sum_qty,
        SUM(extendedprice)                                  AS sum_base_price,
        SUM(extendedprice * (1-discount))                   AS sum_disc_price,
        SUM(extendedprice * (1-discount)*(1+tax))           AS sum_charge,
        AVG(quantity)                                       AS avg_qty,
        AVG(extendedprice)                                  AS avg_price,
        AVG(discount)                                       AS avg_disc,
        COUNT(*)                                            AS count_order
FROM    lineitem
WHERE   shipdate <= DATE('1997-09-01')
GROUP BY returnflag, linestatus;
