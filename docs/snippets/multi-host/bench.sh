npx tensorlane bench --hosts h1,h2 --cluster lab/cluster.json
