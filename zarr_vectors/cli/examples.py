"""The examples each ``zarr-vectors`` subcommand prints under its ``--help``."""

from zarr_vectors._extras import needs

__all__ = ["EXAMPLES"]

EXAMPLES = {
    "ingest": "examples:\n  zarr-vectors ingest swc neurons/ -o neurons.zarr --chunk-size 200\n"
    "  zarr-vectors ingest points tiles/*.laz -o city.zarr --chunk-size 50 --file-ids object\n"
    "  zarr-vectors ingest points scan.csv -o scan.zarr --chunk-size 10 --position-columns X,Y,Z\n"
    "  zarr-vectors ingest mesh cells/ -o cells.zarr --chunk-size 1000 --draco\n"
    "  zarr-vectors ingest swc a.swc b.swc -o two.zarr --chunk-size 50 --overwrite\n"
    "  zarr-vectors ingest mesh scans/ -o scans.zarr --chunk-size 500 --recursive\n"
    "  zarr-vectors ingest trx tracts.trx -o tracts.zarr --chunk-size 20\n"
    "  zarr-vectors ingest geojson countries.geojson -o countries.zarr --chunk-size 10\n"
    "  zarr-vectors ingest vector parcels.gpkg -o parcels.zarr --chunk-size 500 --repair",
    "export": "examples:\n  zarr-vectors export swc neurons.zarr --object 3 -o neuron3.swc\n"
    "  zarr-vectors export points city.zarr --bbox 0,0,0,500,500,100 -o part.laz\n"
    "  zarr-vectors export mesh cells.zarr --object 2 -o cell2.glb\n"
    "  zarr-vectors export mesh cells.zarr --object 2 -o cell2.ply\n"
    "  zarr-vectors export mesh cells.zarr --bbox 0,0,0,500,500,500 -o part.obj\n"
    "  zarr-vectors export swc s3://bucket/neurons.zarr --object 3 -o neuron3.swc \\\n"
    "      --storage-options '{\"anon\": true}'\n"
    "  zarr-vectors export neuroglancer cells.zarr cells-ng/",
    "info": "examples:\n  zarr-vectors info neurons.zarr\n  zarr-vectors info s3://bucket/cells.zarr --json\n"
    "  zarr-vectors info s3://bucket/cells.zarr --storage-options '{\"anon\": true}'",
    "query": "examples:\n  zarr-vectors query cells.zarr --bbox 0,0,0,100,100,100 -o box.csv\n"
    "  zarr-vectors query cells.zarr --bbox -50,-50,0,50,50,20 --count\n"
    "  zarr-vectors query neurons.zarr --objects 3 7 -o two.swc\n"
    "  zarr-vectors query tracts.zarr --bbox 0,0,0,40,40,40 --whole-objects -o tracts.ply\n"
    "  zarr-vectors query synapses.zarr --bbox 0,0,0,500,500,500 --where 'confidence > 0.8' --count\n"
    "  zarr-vectors query parcels.zarr --polygon district.geojson --predicate intersects -o hit.geojson\n"
    "  zarr-vectors query s3://bucket/cells.zarr --level 1 --attributes size -o level1.npz \\\n"
    "      --storage-options '{\"anon\": true}'\n"
    "formats by extension: .csv .ply .obj .npz .swc .geojson .las .laz .glb .gltf .stl (see docs/cli.md)",
    "render": "examples:\n  zarr-vectors render cells.zarr --bbox 0,0,0,200,200,200 -o view.png\n"
    "  zarr-vectors render cells.zarr --color-by intensity --view xy -o top.png\n"
    "  zarr-vectors render neurons.zarr --objects 3 7 --color-by object -o two.svg --size 1600x1200\n"
    + needs("render", "matplotlib", "plot"),
    "demo": "examples:\n  zarr-vectors demo\n  zarr-vectors demo /tmp/demo.zarr\n"
    "  zarr-vectors demo /tmp/small.zarr --points 20000",
    "reshard": "examples:\n  zarr-vectors reshard cells.zarr s3://bucket/cells.zarr --shards auto\n"
    "  zarr-vectors reshard cells.zarr packed.zarr --shards 4,4,8\n"
    "  zarr-vectors reshard s3://bucket/cells.zarr local.zarr --shards none --overwrite\n"
    "shards: auto (sized from the grid, as writers do by default), none (one object per cell), N or N,N,N chunks per shard",
    "validate": "examples:\n  zarr-vectors validate cells.zarr\n  zarr-vectors validate cells.zarr --level 2\n"
    "  zarr-vectors validate s3://bucket/cells.zarr --json --storage-options '{\"anon\": true}'\n"
    "levels: 1 structure, 2 metadata, 3 consistency of every cell, 4 geometry, 5 multi-resolution\n"
    "exit status: 0 valid, 1 problems found, 2 the store could not be read",
}
