-- The demo's five workloads as one SQL file (docs/sql.md "The demo from one SQL file"): each view reads
-- the data file its service's demo produces and routes to that service. Paths are relative to the
-- repository's root: `ivmstream sql explain docs/examples/sql/demo.sql`, `ivmstream demo --sql ...`.

-- triangles: the directed 3-cycles of the "social" graph (the demo counts each graph's triangles).
CREATE STREAM edges (src INT, dst INT, graph VARCHAR(20))
  FROM FILE 'services/triangles/data/sample.jsonl' LINE DELIMITED json;
CREATE VIEW social_triangles AS
SELECT COUNT(*) AS triangles
FROM edges e1, edges e2, edges e3
WHERE e1.dst = e2.src AND e2.dst = e3.src AND e3.dst = e1.src
  AND e1.graph = 'social' AND e2.graph = 'social' AND e3.graph = 'social';

-- fivm: the Housing regression's sufficient statistics (count, sums, sums of products) over the
-- natural join, in F-IVM's dialect; Demographics and Transport are static.
CREATE TYPE RingCofactor FROM FILE 'ring/ring_cofactor_degree2.hpp';
CREATE STREAM house (postcode INT, livingarea DOUBLE, price DOUBLE, nbbedrooms DOUBLE, nbbathrooms DOUBLE,
    kitchensize DOUBLE, house DOUBLE, flat DOUBLE, unknown DOUBLE, garden DOUBLE, parking DOUBLE,
    region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE STREAM shop (postcode INT, openinghoursshop DOUBLE, pricerangeshop DOUBLE, sainsburys DOUBLE,
    tesco DOUBLE, ms DOUBLE, region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE STREAM institution (postcode INT, typeeducation DOUBLE, sizeinstitution DOUBLE, region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE STREAM restaurant (postcode INT, openinghoursrest DOUBLE, pricerangerest DOUBLE, region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE TABLE demographics (postcode INT, averagesalary DOUBLE, crimesperyear DOUBLE, unemployment DOUBLE,
    nbhospitals DOUBLE, region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE TABLE transport (postcode INT, nbbuslines DOUBLE, nbtrainstations DOUBLE, distancecitycentre DOUBLE,
    region VARCHAR(10))
  FROM FILE 'services/fivm/data/housing.jsonl' LINE DELIMITED json;
CREATE VIEW housing_regression AS
SELECT SUM(
    [lift<0>: RingCofactor<double,0,1>](price) *
    [lift<1>: RingCofactor<double,1,1>](livingarea) *
    [lift<2>: RingCofactor<double,2,1>](nbbedrooms) *
    [lift<3>: RingCofactor<double,3,1>](nbbathrooms) *
    [lift<4>: RingCofactor<double,4,1>](pricerangeshop) *
    [lift<5>: RingCofactor<double,5,1>](averagesalary) *
    [lift<6>: RingCofactor<double,6,1>](crimesperyear) *
    [lift<7>: RingCofactor<double,7,1>](distancecitycentre)) AS cofactors
FROM house NATURAL JOIN shop NATURAL JOIN institution NATURAL JOIN restaurant NATURAL JOIN demographics
     NATURAL JOIN transport;

-- reservoir: 25 uniform walks of three edges that do not step straight back, per graph.
CREATE STREAM links (src INT, dst INT, graph VARCHAR(20))
  FROM FILE 'services/reservoir/data/graph.jsonl' LINE DELIMITED json (relation := 'edges');
CREATE VIEW walks AS
SELECT g1.src AS a, g1.dst AS b, g2.dst AS c, g3.dst AS d, g1.graph
FROM links g1, links g2, links g3
WHERE g1.dst = g2.src AND g2.dst = g3.src AND g1.graph = g2.graph AND g2.graph = g3.graph
  AND g1.src <> g2.dst AND g1.dst <> g3.dst
USING SAMPLE reservoir(25 ROWS);

-- vwap: DBToaster's VWAP over the order book.
CREATE STREAM bids (t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'services/vwap/data/finance-standard.csv'
  LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE VIEW vwap AS
SELECT SUM(b1.price * b1.volume) AS vwap
FROM bids b1
WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3) > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price);

-- sketches: TPC-H Q3's revenue per order, answered over a range-based provenance sketch of lineitem.
CREATE STREAM customer (custkey INT, name VARCHAR(25), address VARCHAR(40), nationkey INT, phone CHAR(15),
    acctbal DECIMAL(15, 2), mktsegment CHAR(10), comment VARCHAR(117), db VARCHAR(10))
  FROM FILE 'services/sketches/data/tpch_demo.jsonl' LINE DELIMITED json;
CREATE STREAM orders (orderkey INT, custkey INT, orderstatus CHAR(1), totalprice DECIMAL(15, 2),
    orderdate DATE, orderpriority CHAR(15), clerk CHAR(15), shippriority INT, comment VARCHAR(79),
    db VARCHAR(10))
  FROM FILE 'services/sketches/data/tpch_demo.jsonl' LINE DELIMITED json;
CREATE STREAM lineitem (orderkey INT, partkey INT, suppkey INT, linenumber INT, quantity DECIMAL(15, 2),
    extendedprice DECIMAL(15, 2), discount DECIMAL(15, 2), tax DECIMAL(15, 2), returnflag CHAR(1),
    linestatus CHAR(1), shipdate DATE, commitdate DATE, receiptdate DATE, shipinstruct CHAR(25),
    shipmode CHAR(10), comment VARCHAR(44), db VARCHAR(10))
  FROM FILE 'services/sketches/data/tpch_demo.jsonl' LINE DELIMITED json;
PROVENANCE WITH COARSE GRAINED RANGESB(lineitem(orderkey 0, 80, 160, 240, 320, 400, 480, 560, 640)) OF (
  SELECT l.orderkey, SUM(l.extendedprice * (1 - l.discount)) AS revenue, o.orderdate, o.shippriority
  FROM customer c, orders o, lineitem l
  WHERE c.custkey = o.custkey AND l.orderkey = o.orderkey
    AND o.orderdate < DATE('1995-03-15') AND l.shipdate > DATE('1995-03-15')
  GROUP BY l.orderkey, o.orderdate, o.shippriority
);
