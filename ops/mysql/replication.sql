-- The stand-in MySQL only (docker-compose.yml's `mysql`): its `graphrag` user follows the binary log
-- too, so `graphrag cdc` runs with the same URL as the readers. Against Doughnut's own database,
-- give change capture a user of its own (README, "The database user"; GRAPHRAG_CDC_DATABASE_URL).
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'graphrag'@'%';
