-- DBToaster's price spread (dbtoaster-a5, test/queries/finance/pricespread.sql; public).
CREATE STREAM bids(T float, ID int, BROKER_ID int, VOLUME float, PRICE float)
  FROM FILE '../../experiments/data/finance/standard/finance.csv'
  LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');

CREATE STREAM asks(T float, ID int, BROKER_ID int, VOLUME float, PRICE float)
  FROM FILE '../../experiments/data/finance/standard/finance.csv'
  LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT SUM(a.price - b.price) AS psp
FROM   bids b, asks a
WHERE  ( b.volume > 0.0001 * (SELECT SUM(b1.volume) FROM bids b1) )
  AND  ( a.volume > 0.0001 * (SELECT SUM(a1.volume) FROM asks a1) );
