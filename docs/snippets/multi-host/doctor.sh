npx tensorlane doctor --cluster lab/cluster.json            # as the config's first driver; --driver <name>
