# EC2 instances booted from a Talos AMI with the machine config as user data.
# Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), region from var.region.

terraform {
  required_version = ">= 1.4"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # v6 stores user_data in clear text in the state (RezusCloud seals the state); a new major
      # is adopted deliberately, not by the next init.
      version = "~> 6.0"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret, at most 16,384 bytes)."
  type = map(object({
    role           = string
    user_data      = string
    size           = optional(string)
    image          = optional(string)
    subnet_id      = optional(string)
    root_volume_gb = optional(number)
  }))
  sensitive = true
}

variable "region" {
  type = string
}

variable "default_size" {
  description = "Instance type when a machine has no size (T2 is not supported by Talos; use T3 or newer)."
  type        = string
  default     = "t3.small"
}

variable "default_image" {
  description = "Talos AMI id when a machine has no image; without it the official Sidero Labs AMI of talos_version is looked up."
  type        = string
  default     = null
}

variable "talos_version" {
  description = "Talos version of the looked-up AMI, e.g. v1.13.9; null takes the newest release."
  type        = string
  default     = null
  validation {
    # Pre-releases too (v1.14.0-rc.1): a cluster on one gets it passed here as its version.
    condition     = var.talos_version == null || can(regex("^v\\d+\\.\\d+\\.\\d+(-[0-9A-Za-z][0-9A-Za-z.]*)?$", var.talos_version))
    error_message = "talos_version must look like v1.13.9 or v1.14.0-rc.1."
  }
}

variable "image_arch" {
  description = "Architecture of the looked-up AMI: amd64, or arm64 for Graviton instance types."
  type        = string
  default     = "amd64"
  validation {
    condition     = contains(["amd64", "arm64"], var.image_arch)
    error_message = "image_arch must be amd64 or arm64."
  }
}

variable "subnet_id" {
  description = "Subnet for machines that name none; it needs an IPv6 CIDR block when enable_ipv6 is set."
  type        = string
}

variable "security_group_ids" {
  type    = list(string)
  default = []
}

variable "enable_ipv6" {
  description = "Give each instance an IPv6 address. No default: the create fails on a subnet without an IPv6 CIDR block."
  type        = bool
}

variable "public_ipv4" {
  description = "Give each instance a public IPv4 address, whatever the subnet's map_public_ip_on_launch says."
  type        = bool
  default     = true
}

variable "root_volume_gb" {
  type    = number
  default = 20
}

provider "aws" {
  region = var.region
}

locals {
  # Sidero Labs publishes the official Talos AMIs from this account.
  talos_ami_owner = "540036508848"
  # AWS limits user data to 16,384 bytes before its own base64 encoding.
  user_data_limit = 16384

  names = toset(nonsensitive(keys(var.machines)))
  given_image = {
    for name in local.names : name => try(coalesce(nonsensitive(var.machines[name].image), var.default_image), null)
  }
  lookup_ami = anytrue([for name in local.names : local.given_image[name] == null])
  user_data_b64 = {
    for name in local.names : name => base64encode(var.machines[name].user_data)
  }
  # Bytes, not characters: base64 length less its padding gives the exact byte count.
  user_data_bytes = {
    for name in local.names : name => nonsensitive(length(local.user_data_b64[name]) / 4 * 3 - length(regexall("=", local.user_data_b64[name])))
  }
  spec = {
    for name in local.names : name => {
      role      = nonsensitive(var.machines[name].role)
      size      = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image     = local.given_image[name] != null ? local.given_image[name] : try(data.aws_ami.talos[0].id, null)
      subnet_id = coalesce(nonsensitive(var.machines[name].subnet_id), var.subnet_id)
      volume_gb = coalesce(nonsensitive(var.machines[name].root_volume_gb), var.root_volume_gb)
    }
  }
}

data "aws_ami" "talos" {
  count = local.lookup_ami ? 1 : 0

  owners      = [local.talos_ami_owner]
  most_recent = true
  name_regex  = var.talos_version == null ? "^talos-v\\d+\\.\\d+\\.\\d+-${var.region}-${var.image_arch}$" : "^talos-${replace(var.talos_version, ".", "\\.")}-${var.region}-${var.image_arch}$"

  filter {
    name   = "name"
    values = ["talos-${var.talos_version == null ? "v*" : var.talos_version}-${var.region}-${var.image_arch}"]
  }
}

resource "aws_instance" "machine" {
  for_each = local.names

  ami                         = local.spec[each.key].image
  instance_type               = local.spec[each.key].size
  subnet_id                   = local.spec[each.key].subnet_id
  vpc_security_group_ids      = var.security_group_ids
  associate_public_ip_address = var.public_ipv4
  ipv6_address_count          = var.enable_ipv6 ? 1 : 0
  # The raw config: the provider encodes it, and checks its size at plan only for this form.
  user_data = var.machines[each.key].user_data

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
    # 2: pods (the AWS cloud controller, CSI drivers) sit one hop behind the node.
    http_put_response_hop_limit = 2
    http_protocol_ipv6          = var.enable_ipv6 ? "enabled" : "disabled"
  }

  root_block_device {
    volume_size = local.spec[each.key].volume_gb
    volume_type = "gp3"
  }

  tags = {
    Name                  = "${var.cluster_name}-${each.key}"
    "rezus.cloud/cluster" = var.cluster_name
    "rezus.cloud/role"    = local.spec[each.key].role
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data, ami]

    precondition {
      condition     = local.spec[each.key].image != null
      error_message = "aws: machine ${each.key} has no Talos AMI: set providerSettings.aws.default_image (an AMI id) or let the lookup find one (talos_version, image_arch)."
    }
    precondition {
      condition     = local.user_data_bytes[each.key] <= local.user_data_limit
      error_message = "aws: machine ${each.key}'s Talos config is ${local.user_data_bytes[each.key]} bytes; EC2 user data holds at most 16384. Shorten its patches."
    }
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, i in aws_instance.machine : name => {
      ipv4 = i.public_ip != "" ? i.public_ip : null
      ipv6 = length(i.ipv6_addresses) > 0 ? i.ipv6_addresses[0] : null
    }
  }
}
