-- DBToaster's brokervariance (dbtoaster-a5, test/queries/finance/brokervariance.sql; public); the trace's path in DBToaster's
-- experiments layout, as the other finance queries here.
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../experiments/data/finance/standard/finance.csv'
  LINE DELIMITED orderbook (book := 'bids', brokers := '10', 
                            deterministic := 'yes');

SELECT x.broker_id, SUM(x.volume * x.price * y.volume * y.price * 0.5) AS bsv
FROM   bids x, bids y
WHERE  x.broker_id = y.broker_id
GROUP BY x.broker_id;
